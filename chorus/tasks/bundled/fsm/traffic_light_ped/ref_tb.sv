`timescale 1ns/1ps
module tb_traffic_light_ped;
    logic clk = 0, rst_n = 0, side_car = 0, ped_req = 0, emergency = 0;
    logic [1:0] main_light, side_light;
    logic walk, walk_flash, ped_wait;

    traffic_light_ped dut (
        .clk(clk), .rst_n(rst_n), .side_car(side_car), .ped_req(ped_req), .emergency(emergency),
        .main_light(main_light), .side_light(side_light), .walk(walk), .walk_flash(walk_flash),
        .ped_wait(ped_wait)
    );

    always #5 clk = ~clk;

    task automatic press();
        ped_req = 1; @(negedge clk); ped_req = 0;
    endtask

    task automatic emerg(input int n);
        emergency = 1; repeat (n) @(negedge clk); emergency = 0;
    endtask

    initial begin
        repeat (2) @(negedge clk);
        rst_n = 1;
        // main green with no demand, past the timer saturation
        repeat (25) @(negedge clk);
        // side car that leaves after the minimum side green
        side_car = 1; repeat (12) @(negedge clk);
        side_car = 0; repeat (20) @(negedge clk);
        // side car that stays: side green ends at SIDE_MAX
        side_car = 1; repeat (35) @(negedge clk);
        side_car = 0; repeat (12) @(negedge clk);
        // pedestrian alone, pressed again during the walk
        press(); repeat (16) @(negedge clk);
        press(); repeat (25) @(negedge clk);
        // pedestrian with a car waiting: walk, then side green
        press(); side_car = 1; repeat (30) @(negedge clk);
        side_car = 0; repeat (15) @(negedge clk);
        // emergencies during main green, side green, walk and yellow
        emerg(4); repeat (20) @(negedge clk);
        side_car = 1; repeat (16) @(negedge clk);
        emerg(3); side_car = 0; repeat (20) @(negedge clk);
        press(); repeat (16) @(negedge clk);
        emerg(2); repeat (20) @(negedge clk);
        side_car = 1; repeat (10) @(negedge clk);
        emerg(1); side_car = 0; repeat (20) @(negedge clk);
        // random phase
        repeat (500) begin
            @(negedge clk);
            side_car  = ($urandom % 3) != 0;
            ped_req   = ($urandom % 20) == 0;
            emergency = ($urandom % 60) == 0;
        end
        side_car = 0; ped_req = 0; emergency = 0;
        repeat (5) @(negedge clk);
        #2 rst_n = 0; #4 rst_n = 1;
        repeat (5) @(negedge clk);
        $finish;
    end
endmodule
