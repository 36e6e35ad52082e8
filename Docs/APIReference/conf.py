# Sphinx settings for the API reference page (scripts/api-docs): one page, alabaster's
# stylesheet, no search, no source links.
project = "Gatehouse API"
extensions = ["sphinxcontrib.openapi"]
html_theme = "alabaster"
html_theme_options = {"page_width": "1100px", "sidebar_width": "0px", "show_powered_by": False}
html_show_sourcelink = False
html_show_sphinx = False
html_copy_source = False
html_title = "Gatehouse API"
html_sidebars = {"**": []}
# sphinxcontrib-openapi writes a form-encoded example body (POST /v1/auth/consent) as JSON,
# which the HTTP highlighter cannot lex; that block is shown unhighlighted.
suppress_warnings = ["misc.highlighting_failure"]
