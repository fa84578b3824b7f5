// Renders /api/v1/openapi.json with Swagger UI from the static files
// (drf-spectacular-sidecar); nothing is fetched from other hosts.
window.addEventListener("load", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.schema,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    tryItOutEnabled: false,
    persistAuthorization: false,
  });
});
