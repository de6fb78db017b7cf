"""LogQL syntax: lexer, parser, immutable AST, printer, static checks."""
