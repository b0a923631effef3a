// 8-bit programmable up-counter with compare match, wrap detection and a
// sticky interrupt flag.
module timer_cmp (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       load,
    input  logic [7:0] load_value,
    input  logic       enable,
    input  logic [7:0] compare,
    input  logic       irq_en,
    input  logic       irq_clear,
    output logic [7:0] count,
    output logic       match,
    output logic       wrap,
    output logic       irq
);
    logic counting, hit, rollover;

    // load has priority over counting.
    assign counting = enable && !load;
    assign hit      = counting && (count == compare);
    assign rollover = counting && (count == 8'hFF);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            count <= 8'h00;
            match <= 1'b0;
            wrap  <= 1'b0;
            irq   <= 1'b0;
        end else begin
            if (load)          count <= load_value;
            else if (counting) count <= count + 8'h01;

            match <= hit;
            wrap  <= rollover;

            // A new interrupt in the same cycle as irq_clear wins.
            if (hit && irq_en)  irq <= 1'b1;
            else if (irq_clear) irq <= 1'b0;
        end
    end
endmodule
