import type { Collection, Db } from 'mongodb';
import { MongoServerError } from 'mongodb';
import { DuplicateKeyError, type KeyRecord, type KeyStore } from './key-store.js';

type KeyDocument = Omit<KeyRecord, 'createdAt' | 'revokedAt'> & { createdAt: Date; revokedAt?: Date };

const PROJECTION = { _id: 0 } as const;

function toRecord(doc: KeyDocument): KeyRecord {
  const { createdAt, revokedAt, ...rest } = doc;
  return {
    ...rest,
    createdAt: createdAt.toISOString(),
    ...(revokedAt ? { revokedAt: revokedAt.toISOString() } : {}),
  };
}

/** Key records in MongoDB (db "gateway", collection "keys"), unique on id and on hash. */
export class MongoKeyStore implements KeyStore {
  readonly kind = 'mongo' as const;
  private readonly keys: Collection<KeyDocument>;

  constructor(private readonly db: Db) {
    this.keys = db.collection<KeyDocument>('keys');
  }

  /** Creates the indexes the store relies on; idempotent, run once at start. */
  async init(): Promise<void> {
    await this.keys.createIndexes([
      { key: { id: 1 }, name: 'id_unique', unique: true },
      { key: { sha256: 1 }, name: 'sha256_unique', unique: true },
      { key: { revokedAt: 1 }, name: 'revokedAt', sparse: true },
    ]);
  }

  async insert(record: KeyRecord): Promise<void> {
    const { createdAt, revokedAt, ...rest } = record;
    try {
      await this.keys.insertOne({
        ...rest,
        createdAt: new Date(createdAt),
        ...(revokedAt ? { revokedAt: new Date(revokedAt) } : {}),
      });
    } catch (err) {
      if (err instanceof MongoServerError && err.code === 11000) throw new DuplicateKeyError();
      throw err;
    }
  }

  async findByHash(sha256: string): Promise<KeyRecord | null> {
    const doc = await this.keys.findOne({ sha256: { $eq: sha256 } }, { projection: PROJECTION });
    return doc ? toRecord(doc) : null;
  }

  async get(id: string): Promise<KeyRecord | null> {
    const doc = await this.keys.findOne({ id: { $eq: id } }, { projection: PROJECTION });
    return doc ? toRecord(doc) : null;
  }

  async list(): Promise<KeyRecord[]> {
    const docs = await this.keys.find({}, { projection: PROJECTION, sort: { createdAt: 1 } }).toArray();
    return docs.map(toRecord);
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const result = await this.keys.updateOne(
      { id: { $eq: id }, revokedAt: { $exists: false } },
      { $set: { revokedAt: at } },
    );
    return result.modifiedCount === 1;
  }

  async revokedSince(since: Date): Promise<Array<Pick<KeyRecord, 'id' | 'sha256' | 'revokedAt'>>> {
    const docs = await this.keys
      .find({ revokedAt: { $gt: since } }, { projection: { _id: 0, id: 1, sha256: 1, revokedAt: 1 } })
      .toArray();
    return docs.map((d) => ({ id: d.id, sha256: d.sha256, revokedAt: d.revokedAt?.toISOString() }));
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }
}
