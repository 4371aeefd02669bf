# Convenience wrappers around dev.py (which does the real work).
PYTHON ?= python3

.PHONY: lab test bench exercises lite
lab:
	$(PYTHON) dev.py lab
test:
	$(PYTHON) dev.py test $(ARGS)
bench:
	$(PYTHON) dev.py bench $(ARGS)
exercises:
	$(PYTHON) dev.py exercises $(ARGS)
lite:
	$(PYTHON) dev.py lite $(ARGS)
