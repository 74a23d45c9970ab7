/**
 * The company fields of a fresh Mautic 5.1.1 (FieldModel::$coreCompanyFields), as its API lists
 * them, recorded in real-mautic-5.1.1/companies_batch_new.json (a created company) and
 * companies_batch_edit.json (a loaded one). They share the field table with the contact fields,
 * hence ids 29–43.
 */
import type { FieldDefinition } from './contact-fields.ts';

const INDUSTRIES = [
  'Aerospace & Defense',
  'Agriculture',
  'Apparel',
  'Automotive & Assembly',
  'Banking',
  'Biotechnology',
  'Chemicals',
  'Communications',
  'Construction',
  'Consumer Packaged Goods',
  'Education',
  'Electronics',
  'Energy',
  'Engineering',
  'Entertainment',
  'Environmental',
  'Finance',
  'Food & Beverage',
  'Government',
  'Healthcare',
  'Hospitality',
  'Insurance',
  'Machinery',
  'Manufacturing',
  'Media',
  'Metals & Mining',
  'Not for Profit',
  'Oil & Gas',
  'Packaging & Paper',
  'Private Equity & Principal Investors',
  'Recreation',
  'Real Estate',
  'Retail',
  'Semiconductors',
  'Shipping',
  'Social Sector',
  'Technology',
  'Telecommunications',
  'Transportation',
  'Utilities',
  'Other',
];

type Row = [alias: string, label: string, type?: string, properties?: unknown, fixed?: boolean];

const CORE: Row[] = [
  ['companyaddress1', 'Address 1'],
  ['companyaddress2', 'Address 2'],
  ['companyemail', 'Company Email', 'email'],
  ['companyphone', 'Phone', 'tel'],
  ['companycity', 'City'],
  ['companystate', 'State', 'region'],
  ['companyzipcode', 'Zip Code'],
  ['companycountry', 'Country', 'country'],
  ['companyname', 'Company Name'],
  ['companywebsite', 'Website', 'url'],
];
const PROFESSIONAL: Row[] = [
  [
    'companynumber_of_employees',
    'Number of Employees',
    'number',
    { roundmode: 4, scale: 0 },
    false,
  ],
  ['companyfax', 'Fax', 'tel', [], false],
  ['companyannual_revenue', 'Annual Revenue', 'number', { roundmode: 4, scale: 2 }, false],
  [
    'companyindustry',
    'Industry',
    'select',
    { list: INDUSTRIES.map((name) => ({ label: name, value: name })) },
  ],
  ['companydescription', 'Description'],
];

/** The default company fields in id order (29–43), the order of a company Mautic just created. */
export const DEFAULT_COMPANY_FIELDS: readonly FieldDefinition[] = [
  ...CORE.map((row) => ({ row, group: 'core' as const })),
  ...PROFESSIONAL.map((row) => ({ row, group: 'professional' as const })),
].map(({ row: [alias, label, type = 'text', properties = [], fixed = true], group }, index) => ({
  id: 29 + index,
  group,
  label,
  alias,
  type,
  properties,
  fixed,
  defaultValue: null,
}));

/** The order of a company's fields when Mautic loads it from the database. */
export const LOADED_COMPANY_ORDER: readonly string[] = [
  'companyemail',
  'companyaddress1',
  'companyaddress2',
  'companyphone',
  'companycity',
  'companystate',
  'companyzipcode',
  'companycountry',
  'companyname',
  'companywebsite',
  'companyindustry',
  'companydescription',
  'companynumber_of_employees',
  'companyfax',
  'companyannual_revenue',
];

/**
 * From 5.2, a value of a select field that is not in its list is stored as null and the item
 * answered 200 (the default fields have one select, `companyindustry`). An empty value stays.
 */
export function nullUnlistedSelects(fields: Record<string, unknown>): void {
  const value = fields.companyindustry;
  if (typeof value === 'string' && value !== '' && !INDUSTRIES.includes(value)) {
    fields.companyindustry = null;
  }
}
