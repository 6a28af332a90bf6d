"""Report writers: the JSON report (with its schema) and the Markdown summary."""
