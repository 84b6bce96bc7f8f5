"""Presentation: the static renderers (`stepscope.dashboard.render`: Markdown, JSON and
self-contained HTML, pure functions of the typed models) and the Streamlit app (app.py,
views/ one module per page, charts.py its plotly figures, data.py its cached reads).
"""
