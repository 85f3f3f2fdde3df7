"""The write path: the id rule, the door every session-log row passes before it lands, and landing files (durable before acknowledged). Nothing here opens the warehouse."""
