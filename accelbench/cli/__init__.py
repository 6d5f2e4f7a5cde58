"""The command line: thin commands that parse arguments, call the library and print."""
