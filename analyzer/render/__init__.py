"""The renderers: output files, report.html, terminal, Markdown, JUnit and diff pages."""
