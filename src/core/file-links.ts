// How a file of an instance is linked in answers (a changed file's public_url): core
// lists files by instance and path, and the adapter that serves files without a key
// (the REST API's raw endpoint) says what URL reaches one, when it is mounted. Until
// then, and in a service no such adapter serves, files have no link.

/** The URL (relative to the service) of a file's raw bytes, for a path as roomkit holds it or, with `pathEncoding`, as the API shows it. */
export type FileUrl = (instanceId: string, path: string, pathEncoding?: 'percent') => string;

export class FileLinks {
  private link: FileUrl | undefined;

  /** Files are linked with `link` from now on. */
  use(link: FileUrl): void {
    this.link = link;
  }

  urlOf(instanceId: string, path: string): string | undefined {
    return this.link?.(instanceId, path);
  }
}
