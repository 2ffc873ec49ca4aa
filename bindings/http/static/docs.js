// Starts Swagger UI on /docs from the app's own copy of its assets (no CDN, no inline script).
/* global SwaggerUIBundle */
window.ui = SwaggerUIBundle({
  url: document.body.dataset.openapi,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  persistAuthorization: false,
  presets: [SwaggerUIBundle.presets.apis],
});
