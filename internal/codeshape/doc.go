// Package codeshape holds the tests that keep the product's code readable
// in one sitting: files of at most 400 lines and functions of at most 80,
// unless a comment says why not, and the layers that keep one trace on one
// path through the code. It has no code of its own.
package codeshape
