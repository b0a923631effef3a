// Up/down counter with synchronous load, enable and a sticky wrap flag.
module counter_load_wrap #(
    parameter int WIDTH = 6
) (
    input  logic             clk,
    input  logic             rst_n,
    input  logic             en,
    input  logic             up,
    input  logic             load,
    input  logic [WIDTH-1:0] load_value,
    input  logic             clear_wrap,
    output logic [WIDTH-1:0] count,
    output logic             wrapped,
    output logic             at_max,
    output logic             at_zero
);
    localparam logic [WIDTH-1:0] MAX = {WIDTH{1'b1}};

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            count   <= '0;
            wrapped <= 1'b0;
        end else begin
            if (clear_wrap)
                wrapped <= 1'b0;
            if (load) begin
                count <= load_value;
            end else if (en) begin
                if (up) begin
                    if (count == MAX) begin
                        count   <= '0;
                        wrapped <= 1'b1;
                    end else begin
                        count <= count + 1'b1;
                    end
                end else begin
                    if (count == '0) begin
                        count   <= MAX;
                        wrapped <= 1'b1;
                    end else begin
                        count <= count - 1'b1;
                    end
                end
            end
        end
    end

    assign at_max  = (count == MAX);
    assign at_zero = (count == '0);
endmodule
