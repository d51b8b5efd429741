"""The OpenAPI document, under the read rule like every other read, and its two browsable
views.

FastAPI serves /openapi.json, /docs and /redoc itself, outside every dependency: with
GRPO_READ_REQUIRES_TOKEN the document answered without a token. The app turns those off
(app/main.py) and this router serves them instead. /docs and /redoc stay open: they are
HTML shells with no data of their own that a browser opens from a link (the dashboard's
"API"), which sends no Authorization header. They fetch the document with the token the
dashboard keeps in this browser (localStorage, app/static/js/token.js), and Swagger UI's
"Try it out" sends it too; with no token stored, where reads need one, the page says so.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from app.api.deps import ReadAccess

router = APIRouter(include_in_schema=False)

OPENAPI_URL = "/openapi.json"
TITLE = "GRPO Service"
# the assets FastAPI's own pages load (fastapi.openapi.docs)
SWAGGER_JS = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"
SWAGGER_CSS = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"
REDOC_JS = "https://cdn.jsdelivr.net/npm/redoc@2/bundles/redoc.standalone.js"
FAVICON = "/static/favicon.svg"

# the dashboard's stored token (app/static/js/token.js), as an Authorization header
STORED_TOKEN_JS = """
const stored = (() => {
  try {
    return localStorage.getItem('grpo.apiToken') || '';
  } catch {
    return '';
  }
})();
const tokenHeaders = stored ? { Authorization: `Bearer ${stored}` } : {};
"""


def _page(title: str, head: str, body: str) -> HTMLResponse:
    return HTMLResponse(
        f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="icon" href="{FAVICON}">
{head}
<title>{TITLE} - {title}</title>
</head>
<body>
{body}
</body>
</html>
"""
    )


@router.get(OPENAPI_URL, dependencies=[ReadAccess])
async def openapi_document(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui() -> HTMLResponse:
    return _page(
        "Swagger UI",
        f'<link rel="stylesheet" href="{SWAGGER_CSS}">',
        f"""<div id="swagger-ui"></div>
<script src="{SWAGGER_JS}"></script>
<script>
{STORED_TOKEN_JS}
SwaggerUIBundle({{
  url: '{OPENAPI_URL}',
  dom_id: '#swagger-ui',
  layout: 'BaseLayout',
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  // the stored token on the document's fetch and on "Try it out", unless one is typed in
  requestInterceptor: (request) => {{
    if (stored && !request.headers.Authorization) {{
      request.headers.Authorization = `Bearer ${{stored}}`;
    }}
    return request;
  }},
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
}});
</script>""",
    )


@router.get("/redoc", response_class=HTMLResponse)
async def redoc() -> HTMLResponse:
    return _page(
        "ReDoc",
        "<style>body { margin: 0; }</style>",
        f"""<div id="redoc"></div>
<script src="{REDOC_JS}"></script>
<script>
{STORED_TOKEN_JS}
const root = document.getElementById('redoc');
fetch('{OPENAPI_URL}', {{ headers: tokenHeaders }})
  .then((response) => {{
    const button = 'with the API token button of the dashboard';
    if (response.status === 401) {{
      throw new Error(`Reading the API document needs an API token: set one ${{button}}.`);
    }}
    if (response.status === 403) {{
      throw new Error(`The API token stored in this browser was refused: set another ${{button}}.`);
    }}
    if (!response.ok) {{
      throw new Error(`The API document could not be read (HTTP ${{response.status}}).`);
    }}
    return response.json();
  }})
  .then((spec) => Redoc.init(spec, {{}}, root))
  .catch((error) => {{
    root.style.padding = '2rem';
    root.textContent = error.message;
  }});
</script>""",
    )
