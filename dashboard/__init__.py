"""Presentation: the Streamlit app and the static renderers (text, Markdown, JSON).

Renderers are pure functions from analyzer frames to strings.
"""
