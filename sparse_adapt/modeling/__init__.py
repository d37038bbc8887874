"""The model: a masked-LM read as a SPLADE encoder.

- ``heads.py``: the registry of masked-LM head families (how each splits into backbone,
  head transform and decoder; how an encoder gets a head).
- ``pooling.py``: SPLADE pooling ``w_t = max_i log(1 + relu(logit_{i,t}))``, chunked.
- ``encoder.py``: :class:`SpladeEncoder` (load, save, encode; encode_query/encode_document
  and decode come from ``vectors.py``).
- ``vectors.py``: sparse rows as ranked tokens (one tie-break for every caller); similarity,
  intersection and sparsity; the sentence-transformers-style methods both encoders share.
- ``hub.py``: model names (local path or Hub id), the one-request probe, snapshots and the
  cache; ``settings.py``: the settings file ``sparse_adapt.json``; ``saved.py``: the files a
  save replaces and the rest it keeps.
- ``base.py``: a SPLADE base from an encoder without MLM head (``offline-minilm``);
  ``calibration.py``: its decoder bias; ``builtin.py``: the built-in base names.
- ``tokenization.py``: how a tokenizer sees a term, and the rules extension adds to it.
- ``vocabulary.py``: vocabulary + MLM-head extension, and the domain token ids.
- ``interop.py``: the sentence-transformers module files every saved model carries.
- ``onnx.py``: ONNX export with SPLADE pooling, and an ONNX Runtime encoder.
- ``card.py``: the Hugging Face model card of an adapted model; ``fingerprint.py``: the
  content hash an index records; ``truncation.py``: the count of texts cut at the length limit.
"""
