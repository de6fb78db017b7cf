"""Go text/template, as line_format and label_format use it."""
