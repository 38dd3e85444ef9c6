/** Binary search in an ascending Uint32Array: the position of `value`, or −1 when it is not there. */
export function indexOfSorted(array: Uint32Array, value: number): number {
  let low = 0;
  let high = array.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((array[middle] ?? 0) < value) low = middle + 1;
    else high = middle;
  }
  return low < array.length && array[low] === value ? low : -1;
}
