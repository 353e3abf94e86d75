/** The default of `ScanOptions.pageSize`: entries per page of an error-queue scan. */
export const SCAN_PAGE_SIZE = 500;

/** A page size from `ScanOptions.pageSize`: a whole number >= 1, default {@link SCAN_PAGE_SIZE}. */
export function pageSizeOf(pageSize: number | undefined): number {
  if (pageSize === undefined) return SCAN_PAGE_SIZE;
  if (!(Number.isSafeInteger(pageSize) && pageSize >= 1)) throw new RangeError(`pageSize must be a whole number >= 1, got ${pageSize}`);
  return pageSize;
}
