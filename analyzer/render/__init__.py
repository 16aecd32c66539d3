"""The renderers: report.html and its run browser, terminal, Markdown, JUnit and diff pages."""
