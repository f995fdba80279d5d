"""One module per log format, named by what users know it as (huggingface, megatron, nanogpt,
kv, ...): each holds the ``Format`` (name, sniffing, an example line) and its line parser, and a
vectorised reader where it has one (``kv.columns``). ``logs.registry`` lists them."""
