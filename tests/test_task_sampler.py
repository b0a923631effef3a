"""Which tasks each RL step draws, alone and as one rank of several."""
from chorus.rl.task_sampler import TaskSampler

TASKS = [f"t{i}" for i in range(7)]


def test_each_epoch_is_a_permutation_and_the_position_resumes():
    s = TaskSampler(TASKS, seed=3)
    first, second = s.draw(7), s.draw(7)
    assert sorted(first) == sorted(second) == TASKS and first != second  # a fresh order per epoch
    straight, resumed = TaskSampler(TASKS, seed=3), TaskSampler(TASKS, seed=3)
    straight.draw(5)
    resumed.load_state_dict(straight.state_dict())
    assert resumed.draw(4) == straight.draw(4)


def test_ranks_take_disjoint_shares_of_one_draw_and_stay_at_one_position():
    world, k = 2, 3
    ranks = [TaskSampler(TASKS, seed=1) for _ in range(world)]  # one sampler per DDP process
    single = TaskSampler(TASKS, seed=1)
    for _ in range(4):  # crosses epoch boundaries (7 tasks, 6 per step)
        shares = [r.draw_share(k, world, rank) for rank, r in enumerate(ranks)]
        drawn = single.draw(k * world)
        assert [len(s) for s in shares] == [k] * world
        assert sorted(sum(shares, [])) == sorted(drawn)  # together they are exactly the step's draw
        assert ranks[0].state_dict() == ranks[1].state_dict() == single.state_dict()
