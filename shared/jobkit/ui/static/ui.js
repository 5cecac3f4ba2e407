// jobkit ui: the overview refreshes itself; nothing else runs here.
// Served from the jobkit package (the Content-Security-Policy allows no inline script).
"use strict";
(function () {
  var box = document.getElementById("overview");
  if (!box) return;
  var url = box.getAttribute("data-refresh");
  var interval = parseInt(box.getAttribute("data-interval"), 10) || 10000;
  var busy = false;
  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) throw new Error(response.status + " " + response.statusText);
        return response.text();
      })
      .then(function (html) {
        box.innerHTML = html; // rendered by the server, autoescaped
        box.removeAttribute("data-stale");
      })
      .catch(function () {
        box.setAttribute("data-stale", "true");
      })
      .finally(function () {
        busy = false;
      });
  }
  setInterval(refresh, interval);
})();
