// What a room id may be: the caller picks it, and it travels in URL paths and host-side
// names, so it is kept to characters that need no escaping anywhere.

/** 1-128 of A-Z a-z 0-9 . _ -, but not `.` or `..`, which paths and URLs treat specially. */
export const ROOM_ID_PATTERN = '^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,128}$';
