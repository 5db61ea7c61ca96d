"""The models and their caches: every target and draft the rules are run on.

* :mod:`.ngram`: the model protocol and the small table, Markov and n-gram models;
* :mod:`.tokenizer` and :mod:`.corpus`: the character vocabulary and the bundled text;
* :mod:`.kernels`, :mod:`.attention`, :mod:`.kv_cache` and :mod:`.transformer`: the numpy
  GPT, its KV cache and the kernels it shares;
* :mod:`.bound`: the GPT on one sequence's cache, what the decoders run on;
* :mod:`.fast`: the same forward compiled with numba (the ``fast`` extra);
* :mod:`.batch_kv`: many sequences of one GPT in one padded cache.

Models import :mod:`specdec_lite.rules`, never the engine.
"""
