// The shapes of files as the API shows them: a file's content, the outcome of a write or
// a delete, and a directory listing. These TypeBox schemas are the one source of the
// fields for the routes (validation, OpenAPI), for core/ (the types derived here) and for
// the agent tools, which answer with the same JSON as the endpoints they map to.
import Type from 'typebox';

/**
 * Present only on a path (or name) whose bytes are not valid UTF-8: it is then
 * percent-escaped, `%` as `%25` and each byte that is not UTF-8 as `%XX`.
 */
export const PathEncoding = Type.Optional(
  Type.Literal('percent', {
    description:
      'Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded',
  }),
);

export const FileContent = Type.Object(
  {
    file_path: Type.String({ description: 'Absolute path of the file in the instance' }),
    path_encoding: PathEncoding,
    content: Type.String({ description: 'The content: text when `encoding` is utf-8, else base64' }),
    instance_id: Type.String({ format: 'uuid' }),
    encoding: Type.Enum(['utf-8', 'base64'], { description: '`utf-8` when the bytes are valid UTF-8 without NUL, else `base64`' }),
    size: Type.Integer(),
    mime_type: Type.String(),
  },
  {
    title: 'FileContent',
    // A real answer: the file the CommandResult example made.
    examples: [
      {
        file_path: '/home/user/hello.txt',
        content: 'hello\n',
        instance_id: 'f3c13fec-9952-415d-a499-41fcc0919947',
        encoding: 'utf-8',
        size: 6,
        mime_type: 'text/plain',
      },
    ],
  },
);
export type FileContent = Type.Static<typeof FileContent>;

export const FileWritten = Type.Object(
  {
    file_path: Type.String(),
    path_encoding: PathEncoding,
    instance_id: Type.String({ format: 'uuid' }),
    status: Type.Enum(['created', 'modified']),
    size: Type.Integer(),
  },
  { title: 'FileWritten' },
);
export type FileWritten = Type.Static<typeof FileWritten>;

export const FileDeleted = Type.Object({ file_path: Type.String(), path_encoding: PathEncoding, instance_id: Type.String({ format: 'uuid' }), status: Type.Literal('deleted') });
export type FileDeleted = Type.Static<typeof FileDeleted>;

export const DirEntry = Type.Object({
  name: Type.String(),
  name_encoding: PathEncoding,
  type: Type.Enum(['file', 'directory', 'symlink', 'other']),
  size: Type.Integer(),
  mode: Type.String({ description: 'Permission bits, octal' }),
  mtime: Type.String({ format: 'date-time' }),
});

export const DirectoryListing = Type.Object({ path: Type.String(), path_encoding: PathEncoding, instance_id: Type.String({ format: 'uuid' }), entries: Type.Array(DirEntry), truncated: Type.Boolean() });
export type DirectoryListing = Type.Static<typeof DirectoryListing>;
