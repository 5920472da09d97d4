package limits

import (
	"io"
	"os"
)

// ReadAtMost reads r to its end, but no more than max+1 bytes of it: over
// reports a reader holding more than max, whose first max+1 bytes b then
// is. Every input read whole from outside (a file given on a command line,
// a request body) is read this way, so that a huge one (a /dev/zero, a
// log given by mistake) costs max bytes, not all of it.
func ReadAtMost(r io.Reader, max int) (b []byte, over bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, int64(max)+1))
	return b, len(b) > max, err
}

// ReadFileAtMost is ReadAtMost of the file at path.
func ReadFileAtMost(path string, max int) (b []byte, over bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	return ReadAtMost(f, max)
}
