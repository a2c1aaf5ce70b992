// Ask before a destructive form is sent: <form data-confirm="Delete this?"> submits only
// if the person confirms. A listener on the document (not on each form) also covers forms
// that htmx swaps in later. An external file, so the Content-Security-Policy needs no inline script.
document.addEventListener("submit", function (event) {
  var message = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (message && !window.confirm(message)) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
}, true);
