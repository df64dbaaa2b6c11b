"""What the lanes and the daemon both stand on, and nothing else.

* :mod:`.scoring` -- the scoring plan (models and feature requests resolved
  into feature instances) and the frame assembler every lane reports into;
* :mod:`.picture` -- the planar picture features score, and its conversion
  from a buffer's stored planes;
* :mod:`.layout` -- a registered buffer's checked layout (geometry, planes);
* :mod:`.fdkinds` -- what a received file descriptor really is;
* :mod:`.release` -- the release event a lane hands back for every frame,
  the contract of the daemon's pending-release table.
* :mod:`.batch_size` -- how many frames a GPU lane's session scores in one
  batch (``gpu_batch``).

``core`` imports only itself, :mod:`vmafxd.features`, :mod:`vmafxd.model`
and the foundation shared with the client (``vmafx.formats``,
``vmafx.transport`` ...); tests/test_layers.py checks it.  Nothing is
re-exported here, so importing one core module loads only what it needs.
"""
