// Shared definitions for the uart_rx example.
`ifndef UART_DEFS_SVH
`define UART_DEFS_SVH

`define UART_DATA_BITS 8

// Receiver state encoding (2 bits)
`define UART_ST_IDLE  2'd0
`define UART_ST_START 2'd1
`define UART_ST_DATA  2'd2
`define UART_ST_STOP  2'd3

`endif // UART_DEFS_SVH
