package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// readChunk is the chunk of the file at path that starts at off.
func readChunk(path, head string, off int64) (bundleChunk, error) {
	f, err := os.Open(path)
	if err != nil {
		return bundleChunk{}, fmt.Errorf("open bundle: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return bundleChunk{}, fmt.Errorf("stat bundle: %w", err)
	}
	if off < 0 || off > st.Size() {
		return bundleChunk{}, fmt.Errorf("bundle offset %d outside 0..%d", off, st.Size())
	}
	buf := make([]byte, min(int64(ChunkBytes), st.Size()-off))
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return bundleChunk{}, fmt.Errorf("read bundle: %w", err)
	}
	return bundleChunk{Head: head, Size: st.Size(), Bytes: buf}, nil
}

// chunk decodes a request's answer that is a bundle's chunk.
func chunk(data json.RawMessage, err error) (bundleChunk, error) {
	var c bundleChunk
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("decode bundle chunk: %w", err)
	}
	return c, nil
}

// fetchChunks writes a bundle fetched chunk by chunk with get into a
// temporary file in dir, refusing one over max bytes; the caller removes
// the file it returns.
func fetchChunks(dir string, max int64, get func(off int64) (bundleChunk, error)) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make bundle folder: %w", err)
	}
	f, err := os.CreateTemp(dir, "in-*.bundle")
	if err != nil {
		return "", fmt.Errorf("make bundle file: %w", err)
	}
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	var off int64
	for {
		c, err := get(off)
		if err != nil {
			return fail(err)
		}
		if c.Size > max {
			return fail(fmt.Errorf("bundle of %d bytes, over the %d this side takes", c.Size, max))
		}
		if off+int64(len(c.Bytes)) > c.Size {
			return fail(fmt.Errorf("bundle longer than its stated %d bytes", c.Size))
		}
		if _, err := f.Write(c.Bytes); err != nil {
			return fail(fmt.Errorf("write bundle: %w", err))
		}
		off += int64(len(c.Bytes))
		if off == c.Size {
			break
		}
		if len(c.Bytes) == 0 {
			return fail(fmt.Errorf("bundle cut at %d of %d bytes", off, c.Size))
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write bundle: %w", err)
	}
	return filepath.Clean(f.Name()), nil
}
