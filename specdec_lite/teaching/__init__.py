"""Code the book teaches with, beside the library it explains.

* :mod:`.exactness`: the chapters' step-by-step loop and the chi-square machinery;
* :mod:`.pitfalls`: the wrong rules and drafters the book takes apart;
* :mod:`.example`: the prompts and model pairs the chapters share;
* :mod:`.widgets` and :mod:`.static_slider`: the live and the static sliders.
"""
