"""The transformers bridge (the ``hf`` extra).

* :mod:`.bridge`: a Hugging Face causal LM as a target or draft of this library;
* :mod:`.export`: the shipped GPT written out as a Hugging Face model.
"""
