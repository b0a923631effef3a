`timescale 1ns/1ps
module tb_vending_change;
    logic clk = 0, rst_n = 0, cancel = 0;
    logic [1:0] coin = 0, select = 0;
    logic [6:0] credit;
    logic dispense, ret_dime, ret_nickel, coin_reject, short_funds, service, busy;
    logic [1:0] item;
    logic [2:0] empty;

    vending_change uut (
        .clk(clk), .rst_n(rst_n), .coin(coin), .select(select), .cancel(cancel), .credit(credit),
        .dispense(dispense), .item(item), .ret_dime(ret_dime), .ret_nickel(ret_nickel),
        .coin_reject(coin_reject), .short_funds(short_funds), .empty(empty), .service(service),
        .busy(busy)
    );

    always #5 clk = ~clk;

    task automatic put(input logic [1:0] c);
        coin = c; @(negedge clk); coin = 0;
    endtask

    task automatic choose(input logic [1:0] s);
        select = s; @(negedge clk); select = 0;
        while (busy) @(negedge clk);
    endtask

    task automatic buy(input logic [1:0] s);
        put(3); put(3); put(3); choose(s);
    endtask

    task automatic enter_service();
        cancel = 1; repeat (9) @(negedge clk); cancel = 0;
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        @(negedge clk);
        choose(2'd1);                                  // select with no credit: ignored
        cancel = 1; @(negedge clk); cancel = 0;         // cancel with no credit
        // A with exact money: 25 + 5
        put(3); put(1); choose(2'd1);
        // B with too little, then more, then change 5
        put(3); choose(2'd2); put(3); choose(2'd2);
        // C with change: 75 -> 10 change
        buy(2'd3);
        // fill to the limit (95) and reject extra coins
        put(3); put(3); put(3); put(2); put(2); put(1); put(3); put(2);
        // buy A from 95: 65 change, coins during change are rejected
        select = 2'd1; @(negedge clk); select = 0;
        put(2); put(3); put(1);
        while (busy) @(negedge clk);
        // refund by cancel with a coin in the same cycle
        put(2); put(1); put(3);
        coin = 2'd2; cancel = 1; @(negedge clk); coin = 0; cancel = 0;
        while (busy) @(negedge clk);
        // empty every item, then select them again (refund)
        buy(2'd1); buy(2'd2); buy(2'd2); buy(2'd3); buy(2'd3);
        buy(2'd1); buy(2'd2); buy(2'd3);
        // interrupted service entry, then service mode with refills and a coin
        cancel = 1; repeat (4) @(negedge clk); coin = 1; @(negedge clk); coin = 0;
        repeat (3) @(negedge clk); cancel = 0; @(negedge clk);
        enter_service();
        put(2);
        choose(2'd1); repeat (3) @(negedge clk); choose(2'd3); choose(2'd2);
        repeat (12) @(negedge clk);
        buy(2'd2);
        // random customers
        repeat (400) begin
            @(negedge clk);
            coin   = ($urandom % 3 == 0) ? 2'($urandom) : 2'd0;
            select = ($urandom % 6 == 0) ? 2'($urandom) : 2'd0;
            cancel = ($urandom % 40) == 0;
        end
        coin = 0; select = 0; cancel = 0;
        put(3); put(3);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (3) @(negedge clk);
        $finish;
    end
endmodule
