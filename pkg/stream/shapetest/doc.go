// Package shapetest checks, in a consumer's tests, that it refuses events
// its event source mapping never sends (stream.EventShapeError): another
// source's batch pasted into the console's Test tab, a scheduled event, {}.
package shapetest
