// The one error of OCI images: each part (the reference, the layout, the tar reader, the
// layer applier, the guest's customization) throws it for a failure the operator or a
// profile's author can act on, and its message says what to fix.

/** A failure the caller can act on; the builder passes its message on as the instance's reason. */
export class OciImageError extends Error {}
