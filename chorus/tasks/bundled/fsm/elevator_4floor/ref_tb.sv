`timescale 1ns/1ps
module tb_elevator_4floor;
    logic clk = 0, rst_n = 0, door_block = 0, estop = 0;
    logic [3:0] call = 0;
    logic [1:0] floor;
    logic moving, dir_up, door_open, alarm;
    logic [3:0] pending;

    elevator_4floor dut (
        .clk(clk), .rst_n(rst_n), .call(call), .door_block(door_block), .estop(estop),
        .floor(floor), .moving(moving), .dir_up(dir_up), .door_open(door_open),
        .pending(pending), .alarm(alarm)
    );

    always #5 clk = ~clk;

    task automatic press(input logic [3:0] c);
        call = c; @(negedge clk); call = 0;
    endtask

    task automatic settle();
        repeat (3) @(negedge clk);
        while (pending != 0 || door_open || moving) @(negedge clk);
        repeat (4) @(negedge clk);
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        @(negedge clk);
        press(4'b0001); settle();                 // call at the current floor
        press(4'b1000); settle();                 // up to 3
        press(4'b0001); settle();                 // down to 0
        press(4'b1010); settle();                 // stop at 1 on the way to 3
        press(4'b0101); settle();                 // stop at 2 on the way to 0
        // reversal: going up to 3, a call for 0 arrives on the way
        press(4'b0100); repeat (4) @(negedge clk); press(4'b1001); settle();
        // hold the current floor's button while the door is open
        press(4'b0010); repeat (16) @(negedge clk);
        call = 4'b0010; repeat (8) @(negedge clk); call = 0; settle();
        // obstruction below the limit: two reopenings
        press(4'b1000);
        wait (door_open); wait (!door_open);
        @(negedge clk); door_block = 1; @(negedge clk); door_block = 0;
        wait (!door_open); @(negedge clk); door_block = 1; @(negedge clk); door_block = 0;
        settle();
        // obstruction up to the fault, then recovery
        press(4'b0001);
        wait (door_open); wait (!door_open);
        repeat (3) begin
            @(negedge clk); door_block = 1; @(negedge clk); door_block = 0;
            wait (!door_open);
        end
        door_block = 1; repeat (2) @(negedge clk);
        wait (alarm);
        repeat (5) @(negedge clk); door_block = 0;
        repeat (4) @(negedge clk); door_block = 1; @(negedge clk); door_block = 0;
        settle();
        // emergency stop while moving (call latched during the stop) and with the door open
        press(4'b1000); repeat (8) @(negedge clk);
        estop = 1; press(4'b0100); repeat (5) @(negedge clk); estop = 0;
        settle();
        press(4'b0001); wait (door_open); repeat (2) @(negedge clk);
        estop = 1; repeat (3) @(negedge clk); estop = 0;
        settle();
        // random traffic
        repeat (600) begin
            @(negedge clk);
            call       = ($urandom % 8 == 0) ? 4'($urandom) : 4'd0;
            door_block = ($urandom % 12) == 0;
            estop      = ($urandom % 150) == 0;
        end
        call = 0; door_block = 0; estop = 0;
        settle();
        press(4'b1000); repeat (10) @(negedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(negedge clk);
        $finish;
    end
endmodule
