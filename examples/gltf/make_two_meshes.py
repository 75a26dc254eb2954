"""Writes examples/gltf/two-meshes-one-view.gltf (drawopt's own file, MIT like the project).

Two meshes stored like the Khronos sample 2CylinderEngine: one buffer view with stride 12 holding,
per mesh, its NORMAL then its POSITION stream; drawn at four nodes.

    python examples/gltf/make_two_meshes.py
    drawopt import examples/gltf/two-meshes-one-view.gltf -o examples/gltf/two-meshes-one-view.dstream \
        --per-draw-transforms --bindless --no-primitive-id
"""

import base64
import json
import os

import numpy as np

pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32)
nrm = np.array([[0, 0, 1]] * 3, np.float32)
blob = (nrm.tobytes() + pos.tobytes()) * 2 + np.array([0, 1, 2, 0], np.uint16).tobytes()
acc = []
for m in range(2):
    acc += [{"bufferView": 0, "byteOffset": 72 * m, "componentType": 5126, "count": 3, "type": "VEC3"},
            {"bufferView": 0, "byteOffset": 72 * m + 36, "componentType": 5126, "count": 3, "type": "VEC3",
             "min": [0, 0, 0], "max": [1, 1, 0]}]
acc.append({"bufferView": 1, "componentType": 5123, "count": 3, "type": "SCALAR"})
doc = {"asset": {"version": "2.0", "generator": "drawopt examples/gltf/make_two_meshes.py"},
       "scene": 0, "scenes": [{"nodes": [0, 1, 2, 3]}],
       "nodes": [{"mesh": m % 2, "translation": [i, 0, 0]} for i, m in enumerate([0, 1, 0, 1])],
       "meshes": [{"primitives": [{"attributes": {"NORMAL": 2 * m, "POSITION": 2 * m + 1}, "indices": 4}]}
                  for m in range(2)],
       "buffers": [{"byteLength": len(blob),
                    "uri": "data:application/octet-stream;base64," + base64.b64encode(blob).decode()}],
       "bufferViews": [{"buffer": 0, "byteLength": 144, "byteStride": 12},
                       {"buffer": 0, "byteOffset": 144, "byteLength": 6}],
       "accessors": acc}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "two-meshes-one-view.gltf"), "w") as f:
    json.dump(doc, f, indent=1)
