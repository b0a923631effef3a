// Vending machine: accepts nickels, dimes and quarters up to a credit limit, sells three
// items at different prices from a small stock, returns change (dimes first, then a
// nickel) one coin per cycle, and refunds the credit on cancel or for an empty item.
// Holding cancel alone for SERVICE_HOLD cycles with no credit enters a restock mode,
// left after SERVICE_HOLD cycles without a selection.
module vending_change #(
    parameter int MAX_CREDIT   = 95,
    parameter int PRICE_A      = 30,
    parameter int PRICE_B      = 45,
    parameter int PRICE_C      = 65,
    parameter int SERVICE_HOLD = 8
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic [1:0] coin,      // 0 none, 1 nickel, 2 dime, 3 quarter
    input  logic [1:0] select,    // 0 none, 1 item A, 2 item B, 3 item C
    input  logic       cancel,
    output logic [6:0] credit,
    output logic       dispense,
    output logic [1:0] item,
    output logic       ret_dime,
    output logic       ret_nickel,
    output logic       coin_reject,
    output logic       short_funds,
    output logic [2:0] empty,     // one bit per item: [0] A, [1] B, [2] C
    output logic       service,
    output logic       busy
);
    typedef enum logic [2:0] {
        S_IDLE    = 3'd0,
        S_CREDIT  = 3'd1,
        S_VEND    = 3'd2,
        S_CHANGE  = 3'd3,
        S_REFUND  = 3'd4,
        S_SERVICE = 3'd5
    } state_t;

    state_t     state;
    logic [4:0] coin_val;
    logic [6:0] price;
    logic [2:0][1:0] stock;
    logic [2:0] hold;
    logic [1:0] sidx;

    always_comb begin
        case (coin)
            2'd1:    coin_val = 5'd5;
            2'd2:    coin_val = 5'd10;
            2'd3:    coin_val = 5'd25;
            default: coin_val = 5'd0;
        endcase
        case (select)
            2'd1:    price = 7'(PRICE_A);
            2'd2:    price = 7'(PRICE_B);
            default: price = 7'(PRICE_C);
        endcase
    end

    assign sidx = select - 2'd1;

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state <= S_IDLE;
            {credit, item, hold} <= '0;
            {dispense, ret_dime, ret_nickel, coin_reject, short_funds} <= '0;
            for (int i = 0; i < 3; i++) stock[i] <= 2'd3;
        end else begin
            {dispense, ret_dime, ret_nickel, coin_reject, short_funds} <= '0;
            hold <= '0;
            case (state)
                S_IDLE, S_CREDIT: begin
                    if (cancel) begin
                        if (credit != 0) state <= S_REFUND;
                        coin_reject <= (coin != 2'd0);
                        if (state == S_IDLE && coin == 2'd0 && select == 2'd0) begin
                            hold <= hold + 1'b1;
                            if (hold == 3'(SERVICE_HOLD - 1)) state <= S_SERVICE;
                        end
                    end else if (coin != 2'd0) begin
                        if (credit + 7'(coin_val) <= 7'(MAX_CREDIT)) begin
                            credit <= credit + 7'(coin_val);
                            state  <= S_CREDIT;
                        end else begin
                            coin_reject <= 1'b1;
                        end
                    end else if (select != 2'd0 && state == S_CREDIT) begin
                        if (stock[sidx] == 2'd0) begin
                            state <= S_REFUND;
                        end else if (credit >= price) begin
                            credit      <= credit - price;
                            stock[sidx] <= stock[sidx] - 2'd1;
                            item        <= select;
                            dispense    <= 1'b1;
                            state       <= S_VEND;
                        end else begin
                            short_funds <= 1'b1;
                        end
                    end
                end
                S_VEND: begin
                    coin_reject <= (coin != 2'd0);
                    state       <= (credit == 0) ? S_IDLE : S_CHANGE;
                end
                S_CHANGE, S_REFUND: begin
                    coin_reject <= (coin != 2'd0);
                    if (credit >= 7'd10) begin
                        ret_dime <= 1'b1;
                        credit   <= credit - 7'd10;
                        if (credit == 7'd10) state <= S_IDLE;
                    end else begin
                        ret_nickel <= 1'b1;
                        credit     <= '0;
                        state      <= S_IDLE;
                    end
                end
                S_SERVICE: begin
                    coin_reject <= (coin != 2'd0);
                    if (select != 2'd0) begin
                        stock[sidx] <= 2'd3;
                    end else begin
                        hold <= hold + 1'b1;
                        if (hold == 3'(SERVICE_HOLD - 1)) state <= S_IDLE;
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    assign empty   = {stock[2] == 2'd0, stock[1] == 2'd0, stock[0] == 2'd0};
    assign service = (state == S_SERVICE);
    assign busy    = (state == S_VEND) || (state == S_CHANGE) || (state == S_REFUND);
endmodule
