"""The static renderers: pure functions from a typed model (analyzers/results/) to text.

Markdown and JSON per model (report.py, diff.py, plan.py, nightly.py, hang.py,
summary.py, nccl.py), self-contained HTML per model (html_report.py, html_diff.py,
html_nightly.py over the building blocks of html_page.py, charts from svg_charts.py), and
the shared formatting (format.py), labels (labels.py) and strict JSON (strict_json.py).
Nothing here imports Streamlit, plotly or a database; the CLI commands and the nightly
job call these functions, the Streamlit pages share format.py and labels.py.
"""
