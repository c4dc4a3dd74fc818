// The admin's upload page. Browsers send only base names for the files of a folder input; the
// service needs their relative paths. A file, not an inline script: the CSP allows scripts only
// from this site.
(function () {
  "use strict";
  var form = document.getElementById("skill-upload-form");
  if (!form) return;
  form.addEventListener("submit", function () {
    var folder = document.getElementById(form.dataset.folderInput);
    var paths = document.getElementById(form.dataset.pathsInput);
    if (!folder || !paths) return;
    paths.value = Array.prototype.map.call(folder.files, function (f) {
      return f.webkitRelativePath || f.name;
    }).join("\n");
  });
})();
