import { Type } from 'typebox';

// Open (no additionalProperties: false): it describes responses, and a field added later must not
// break a client that validates strictly. Serializers still send only these three.
export const ErrorSchema = Type.Object(
  {
    code: Type.String({ description: 'Machine-readable error code.', examples: ['invalid_request'] }),
    message: Type.String({
      description: 'Human-readable description of the error.',
      examples: ['body.name is required'],
    }),
    status: Type.Integer({
      minimum: 400,
      maximum: 599,
      description: 'The HTTP status code of the response.',
      examples: [400],
    }),
  },
  { $id: 'Error' },
);
