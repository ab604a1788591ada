"""Prints a GGUF file's tensors and scalar metadata with the `gguf` package.

One line per tensor: T<TAB>name<TAB>type id<TAB>ne0,ne1,..<TAB>offset (relative
to the data section)<TAB>nbytes; then D<TAB>data offset; then one line per
integer scalar KV: K<TAB>key<TAB>value and per string KV:
S<TAB>key<TAB>hex of the UTF-8 bytes.
"""
import sys

import gguf


def main(path):
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        ne = ",".join(str(int(d)) for d in t.shape)
        print(f"T\t{t.name}\t{int(t.tensor_type)}\t{ne}\t{t.data_offset - r.data_offset}\t{t.n_bytes}")
    print(f"D\t{r.data_offset}")
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or len(f.types) != 1:
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.STRING:
            print(f"S\t{name}\t{bytes(f.parts[f.data[0]]).hex()}")
        elif vt not in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64, gguf.GGUFValueType.BOOL):
            print(f"K\t{name}\t{int(f.parts[f.data[0]][0])}")


if __name__ == "__main__":
    main(sys.argv[1])
