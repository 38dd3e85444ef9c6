/**
 * Streaming decoders for the PDF filters that can make a stream bigger than it is (ASCIIHexDecode,
 * ASCII85Decode, RunLengthDecode, LZWDecode; FlateDecode is zlib's), used by the inflation check to
 * follow a `/Filter [...]` chain the way pdf.js will decode it while holding only a few KB. Written
 * here because the check needs them as Node streams that can be stopped at any byte; pdf.js's own
 * decoders buffer the whole output.
 */
import { Transform, type TransformCallback } from "node:stream";
import { createInflate } from "node:zlib";

export type PdfFilter = "flate" | "hex" | "a85" | "rl" | "lzw";

/** Filter names as pdf.js reads them (full and abbreviated); anything else is not decoded for text. */
const FILTER_NAMES: Record<string, PdfFilter> = {
  FlateDecode: "flate",
  Fl: "flate",
  ASCIIHexDecode: "hex",
  AHx: "hex",
  ASCII85Decode: "a85",
  A85: "a85",
  RunLengthDecode: "rl",
  RL: "rl",
  LZWDecode: "lzw",
  LZW: "lzw",
};

export function filterNamed(name: string): PdfFilter | null {
  return FILTER_NAMES[name] ?? null;
}

/** A decoder whose state is kept between chunks; `decode` returns the output of one chunk. */
abstract class Decoder extends Transform {
  protected ended = false;
  protected abstract decode(chunk: Buffer): Buffer;
  protected flushRest(): Buffer | null {
    return null;
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    done(null, this.ended ? undefined : this.decode(chunk));
  }
  override _flush(done: TransformCallback): void {
    done(null, this.ended ? undefined : (this.flushRest() ?? undefined));
  }
}

const hexValue = (code: number) =>
  code >= 48 && code <= 57
    ? code - 48
    : code >= 65 && code <= 70
      ? code - 55
      : code >= 97 && code <= 102
        ? code - 87
        : -1;

class AsciiHexDecoder extends Decoder {
  private high = -1;
  protected decode(chunk: Buffer): Buffer {
    const out = Buffer.allocUnsafe(chunk.length >> 1);
    let length = 0;
    for (const code of chunk) {
      if (code === 0x3e) {
        this.ended = true; // ">" ends the data
        break;
      }
      const value = hexValue(code);
      if (value < 0) continue; // whitespace (and junk) is skipped
      if (this.high < 0) this.high = value;
      else {
        out[length++] = (this.high << 4) | value;
        this.high = -1;
      }
    }
    return out.subarray(0, length);
  }
}

class Ascii85Decoder extends Decoder {
  private group: number[] = [];
  protected decode(chunk: Buffer): Buffer {
    const out: Buffer[] = [];
    const bytes = Buffer.allocUnsafe(chunk.length * 4 + 4);
    let length = 0;
    for (const code of chunk) {
      if (code === 0x7e) {
        this.ended = true; // "~>" ends the data
        break;
      }
      if (code === 0x7a && this.group.length === 0) {
        bytes.fill(0, length, length + 4);
        length += 4;
      } else if (code >= 0x21 && code <= 0x75) {
        this.group.push(code - 0x21);
        if (this.group.length === 5) length = this.writeGroup(bytes, length, 4);
      }
    }
    out.push(bytes.subarray(0, length));
    if (this.ended) out.push(this.flushRest() ?? Buffer.alloc(0));
    return Buffer.concat(out);
  }
  private writeGroup(bytes: Buffer, at: number, count: number): number {
    let value = 0;
    for (let index = 0; index < 5; index++) value = value * 85 + (this.group[index] ?? 84);
    this.group = [];
    for (let index = 0; index < count; index++) bytes[at + index] = (value >>> (24 - 8 * index)) & 0xff;
    return at + count;
  }
  protected override flushRest(): Buffer | null {
    if (this.group.length < 2) return null;
    const bytes = Buffer.alloc(4);
    const count = this.group.length - 1;
    return bytes.subarray(0, this.writeGroup(bytes, 0, count));
  }
}

class RunLengthDecoder extends Decoder {
  private copy = 0; // literal bytes still to copy
  private repeat = 0; // times the next byte is repeated
  protected decode(chunk: Buffer): Buffer {
    const out: Buffer[] = [];
    let at = 0;
    while (at < chunk.length && !this.ended) {
      if (this.copy > 0) {
        const piece = chunk.subarray(at, at + this.copy);
        out.push(piece);
        this.copy -= piece.length;
        at += piece.length;
      } else if (this.repeat > 0) {
        out.push(Buffer.alloc(this.repeat, chunk[at]!));
        this.repeat = 0;
        at++;
      } else {
        const header = chunk[at++]!;
        if (header === 128) this.ended = true;
        else if (header < 128) this.copy = header + 1;
        else this.repeat = 257 - header;
      }
    }
    return Buffer.concat(out);
  }
}

/** LZW as PDF uses it: 9- to 12-bit codes, 256 clears the table, 257 ends; EarlyChange 1 by default. */
class LzwDecoder extends Decoder {
  private readonly prefix = new Int32Array(4096);
  private readonly suffix = new Uint8Array(4096);
  private readonly lengths = new Uint16Array(4096);
  private next = 258;
  private previous = -1;
  private bits = 0;
  private bitCount = 0;

  constructor(private readonly earlyChange: number) {
    super();
    for (let code = 0; code < 256; code++) [this.suffix[code], this.lengths[code]] = [code, 1];
  }

  private codeWidth(): number {
    const size = this.next + this.earlyChange;
    return size < 512 ? 9 : size < 1024 ? 10 : size < 2048 ? 11 : 12;
  }

  protected decode(chunk: Buffer): Buffer {
    const out: Buffer[] = [];
    for (const byte of chunk) {
      this.bits = ((this.bits << 8) | byte) & 0xffffff;
      this.bitCount += 8;
      const width = this.codeWidth();
      if (this.bitCount < width) continue;
      const code = (this.bits >>> (this.bitCount - width)) & ((1 << width) - 1);
      this.bitCount -= width;
      if (code === 256) {
        [this.next, this.previous] = [258, -1];
      } else if (code === 257) {
        this.ended = true;
        break;
      } else {
        const piece = this.string(code);
        if (piece === null) {
          this.ended = true; // corrupt: pdf.js stops here too
          break;
        }
        out.push(piece);
      }
    }
    return Buffer.concat(out);
  }

  /** The bytes of `code`, adding the table entry the code implies. */
  private string(code: number): Buffer | null {
    const known = code < this.next;
    if (!known && (code !== this.next || this.previous < 0)) return null;
    if (this.previous >= 0 && this.next < 4096) {
      const first = this.firstByte(known ? code : this.previous);
      this.prefix[this.next] = this.previous;
      this.suffix[this.next] = first;
      this.lengths[this.next] = this.lengths[this.previous]! + 1;
      this.next++;
    }
    this.previous = code;
    let length = this.lengths[code]!;
    const bytes = Buffer.allocUnsafe(length);
    for (let at = code; length > 0; at = this.prefix[at]!) bytes[--length] = this.suffix[at]!;
    return bytes;
  }

  private firstByte(code: number): number {
    let at = code;
    while (at >= 256) at = this.prefix[at]!;
    return at;
  }
}

/** A stage of the chain that decodes `filter`. */
export function decoderFor(filter: PdfFilter, earlyChange = 1): Transform {
  switch (filter) {
    case "flate":
      return createInflate();
    case "hex":
      return new AsciiHexDecoder();
    case "a85":
      return new Ascii85Decoder();
    case "rl":
      return new RunLengthDecoder();
    case "lzw":
      return new LzwDecoder(earlyChange);
  }
}
