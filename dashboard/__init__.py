"""Presentation, in two parts that never import each other upwards: the static renderers
(`stepscope.dashboard.render`: Markdown, JSON and self-contained HTML, pure functions of
the typed results, used by the CLI, the nightly job and the app) and the Streamlit app
(`stepscope.dashboard.app`: main.py the router, views/ one module per page, charts.py its
plotly figures, data.py its cached reads). tests/project/test_layers.py checks that the
renderers import no Streamlit, plotly, database or app module.
"""
