"""Deployment: exporter.py writes ONNX files (mg.export_onnx, mg.to_onnx), importer.py reads them
(mg.import_onnx). The `onnx` package itself is loaded only when one of them is called."""
