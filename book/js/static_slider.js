/* Precomputed sliders (specdec_lite.static_slider): the page holds one figure per slider
 * position, all hidden but the default. This script shows the slider and swaps the visible
 * figure when it moves, so the plain HTML book responds without a kernel. */
(function () {
  "use strict";

  function activate(root) {
    if (root.getAttribute("data-sds-ready") === "1") return;
    var input = root.querySelector("input[data-sds-input]");
    var control = root.querySelector("[data-sds-control]");
    var current = root.querySelector("[data-sds-current]");
    var note = root.querySelector("[data-sds-note]");
    var frames = root.querySelectorAll("[data-sds-frame]");
    if (!input || !control || frames.length === 0) return;

    function show(index) {
      var text = null;
      for (var i = 0; i < frames.length; i++) {
        var match = frames[i].getAttribute("data-sds-index") === String(index);
        frames[i].hidden = !match;
        if (match) text = frames[i].getAttribute("data-sds-text");
      }
      if (text !== null) {
        input.setAttribute("aria-valuetext", text);
        if (current) current.textContent = text;
      }
    }

    input.addEventListener("input", function () { show(input.value); });
    input.addEventListener("change", function () { show(input.value); });
    input.disabled = false;
    control.hidden = false;
    if (note) note.hidden = true;
    root.setAttribute("data-sds-ready", "1");
    show(input.value);
  }

  function activateAll() {
    var roots = document.querySelectorAll("[data-sds-slider]");
    for (var i = 0; i < roots.length; i++) activate(roots[i]);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", activateAll);
  } else {
    activateAll();
  }
})();
