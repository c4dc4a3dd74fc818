// Browsers send only a file's base name; the relative paths of a chosen folder travel as JSON.
document.addEventListener("change", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || !input.dataset.pathsField) return;
  const field = input.form.elements.namedItem(input.dataset.pathsField);
  field.value = JSON.stringify(Array.from(input.files, (f) => f.webkitRelativePath || f.name));
});
