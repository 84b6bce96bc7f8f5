"""The Streamlit app: the router (main.py), one module per page (views/), the plotly figures
(charts.py, charts_analyses.py), the cached reads (data.py), uploads (uploads.py) and
layout helpers (widgets.py). It renders with dashboard/render/ and never the reverse.
"""
