// The console's only script (the Content-Security-Policy allows no inline
// script or event-handler attributes):
// - copy buttons: <button data-copy="#element-id">;
// - <select data-autosubmit> submits its form when changed;
// - <form data-confirm="Question?"> asks before it is sent.
document.addEventListener("change", function (event) {
  var select = event.target.closest("select[data-autosubmit]");
  if (select && select.form) select.form.submit();
});
document.addEventListener("submit", function (event) {
  var form = event.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
});
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-copy]");
  if (!button) return;
  var source = document.querySelector(button.getAttribute("data-copy"));
  if (!source) return;
  var text = source.textContent.trim();
  var done = function () {
    var label = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done);
  } else {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    document.execCommand("copy");
    done();
  }
});
